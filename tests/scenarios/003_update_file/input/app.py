import sys


def greet(name):
    return "hi " + name


def main():
    print(greet(sys.argv[1]))
