def greet(name):
    return "hi " + name


def bye():
    return "bye"
