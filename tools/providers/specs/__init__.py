"""The provider families' specs, one light module per adapter module of ``tools.providers``.

A module here declares ``FAMILY`` (or ``FAMILIES``) and imports nothing but the standard library,
``store`` and :mod:`tools.providers.family`: it names its adapter's functions by string
(:class:`tools.providers.family.Deferred`), so reading every family (the settings do, on every
command) imports no SDK. Its adapter module hands the spec on as its own ``FAMILY``.
"""
