class A:
    def m(self):
        return 2

class B:
    def m(self):
        return 1
