"""``ferry bench soak``: Ferry under a nemesis for N minutes, then what was lost, duplicated or disordered.

The parts: :mod:`.schedule` (pure: a seed -> the faults and when), :mod:`.verdict` (pure: what the
source acknowledged and what the destination holds -> lost, duplicated, disordered per partition),
:mod:`.fleet` (the soak's own stack, the fleet's config and route, the supervisor of the Ferry
processes), :mod:`.stream` (Kafka's ``VerifiableProducer``, and reading a topic back),
:mod:`.nemesis` (applies a fault), :mod:`.run` (one run and its tables) and :mod:`.cli` (the command).
"""
