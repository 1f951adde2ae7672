def greet():
    pass
