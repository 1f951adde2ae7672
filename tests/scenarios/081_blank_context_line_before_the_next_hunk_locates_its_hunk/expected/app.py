def a():
    return 1
def b():
    return 10

x = 2
y = 3
