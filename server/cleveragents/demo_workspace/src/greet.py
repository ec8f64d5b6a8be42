def greet(name: str) -> str:
    # TODO: the greeting has a typo
    return f"Helo, {name}!"
