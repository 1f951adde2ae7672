def f():
    x = 1

    return 1
