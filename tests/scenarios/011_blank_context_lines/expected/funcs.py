def first():
    return 1


def second():
    return 22


def third():
    return 3
