"""The dynamic-network zoo: small, seeded versions of the networks in the DyCL paper.

Every module in :data:`ZOO` exposes ``build() -> (model, example_input)``,
``sample(seed) -> input`` and ``postprocess(output)`` (an int label for classifiers,
a tuple of token ids for generators).
"""

ZOO = (
    "models.sdn_mobilenet",
    "models.sdn_vgg19",
    "models.sdn_resnet56",
    "models.sdn_wrn32_4",
    "models.skipnet_rnn",
    "models.skipnet_ff",
    "models.blockdrop",
    "models.caption_resnext",
    "models.caption_googlenet",
    "models.translation",
    "models.ranet",
)

GENERATORS = ("models.caption_resnext", "models.caption_googlenet", "models.translation")
