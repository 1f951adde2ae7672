print('scratch')
