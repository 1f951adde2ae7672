import sys


def greet(name):
    return f"Hello, {name}!"


def main():
    print(greet(sys.argv[1]))
