class A:
    def m(self):
        return 1

class B:
    def m(self):
        return 2
