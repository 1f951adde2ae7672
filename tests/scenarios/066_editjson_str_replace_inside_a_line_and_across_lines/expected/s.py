total = price * qty * (1 + tax)  # new
if total:
    pay(total)
