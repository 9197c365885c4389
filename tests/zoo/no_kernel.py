def kernel(data):
    return data[0]
