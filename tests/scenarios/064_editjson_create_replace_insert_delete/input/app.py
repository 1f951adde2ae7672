import os


def main():
    print('hi')
