from applyonce.adapters.cli import main

main()
