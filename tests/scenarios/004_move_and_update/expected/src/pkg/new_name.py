# module
VERSION = 2
NAME = 'x'
