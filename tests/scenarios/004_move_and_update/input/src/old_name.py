# module
VERSION = 1
NAME = 'x'
