"""The built-in model providers: each module here is one provider's registration, its
``PROVIDER`` (a :class:`~cleveragents.llm.Provider`), beside its adapter when it has one
of its own.

The provider table (``cleveragents.llm._providers``) registers every module's
``PROVIDER`` on its first use, so adding a provider is adding a module here; nothing
else lists them. Importing a module here imports no provider SDK: an adapter imports
its SDK when it is built.
"""
