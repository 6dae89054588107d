"""Cloud providers: the Provider protocol (``base``), the registry that finds a cloud by name
(``registry``), and one package per cloud (``<name>/``, as the registry lists them) holding
everything that cloud needs on the client side, including the data its pods use to end
themselves."""
