"""Where local models run and the files they load: device and precision choice
(:mod:`~tools.runtime.devices`), Whisper models (:mod:`~tools.runtime.whisper_models`) and GGUF
text models (:mod:`~tools.runtime.gguf_models`), each joined once from the parts its PyPI
packages ship.

May import: nothing of ours but :mod:`store`.
"""
