from decimal import Decimal

TAX_RATE = Decimal("0.20")


def net_price(gross: Decimal) -> Decimal:
    return gross / (1 + TAX_RATE)


def gross_price(net: Decimal) -> Decimal:
    return net * (1 + TAX_RATE)
