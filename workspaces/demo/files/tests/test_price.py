from decimal import Decimal

from shop.price import gross_price


def test_gross_price():
    assert gross_price(Decimal("10")) == Decimal("12.00")
