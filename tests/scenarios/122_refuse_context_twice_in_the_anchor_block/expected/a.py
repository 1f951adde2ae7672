class A:
    def m(self):
        return 1

    def n(self):
        return 1

class B:
    def m(self):
        return 1
