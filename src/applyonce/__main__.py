from applyonce.adapters.launch import applyonce_main

applyonce_main()
