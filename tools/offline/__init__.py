"""The offline harness — never evidence of model quality: synthetic playlists and campaigns
(:mod:`~tools.offline.synthetic`, :mod:`~tools.offline.campaign`), and the deterministic
answers (:mod:`~tools.offline.offline_answers`) and frame reading
(:mod:`~tools.offline.vision`) the offline provider gives.

May import: :mod:`tools.index` (media) and :mod:`tools.contracts.role_types` (the roles' data
types, not their declarations), besides :mod:`store`.
"""
