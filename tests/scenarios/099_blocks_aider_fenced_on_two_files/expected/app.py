def greet(name):
    return f"Hello, {name}!"


def bye():
    return "Goodbye"
