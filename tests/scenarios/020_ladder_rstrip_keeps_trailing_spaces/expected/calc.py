def calc():  
    x = 1	
    y = 3
    return x + y 
