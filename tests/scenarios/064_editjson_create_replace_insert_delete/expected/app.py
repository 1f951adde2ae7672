import os
import sys


def main():
    print('hello')
