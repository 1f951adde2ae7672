total = price * qty  # old
if total:
    pay(total)
