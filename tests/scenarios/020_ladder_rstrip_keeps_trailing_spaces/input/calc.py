def calc():  
    x = 1	
    y = 2   
    return x + y 
