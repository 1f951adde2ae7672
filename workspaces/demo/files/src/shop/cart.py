from decimal import Decimal

from shop.price import gross_price


class Cart:
    def __init__(self) -> None:
        self.items: list[tuple[str, Decimal]] = []

    def add(self, name: str, net: Decimal) -> None:
        self.items.append((name, net))

    def total(self) -> Decimal:
        return sum((gross_price(net) for _, net in self.items), Decimal(0))
