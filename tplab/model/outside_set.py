"""A second evaluation set, written by hand to differ from the corpus generator.

The held-out split measures the templates; a user types their own sentence. These pairs use names,
places, animals and nouns the lexicon does not have, plural subjects the templates never build, and
shapes the generator does not produce (unknown verbs, possessives, bare plurals, adverbs it has no
word for), each with one of the corpus's error classes or none. They are never used for training
and the generator is not tuned against them; ``tplab eval`` reports exact match on them beside the
held-out figure, with the rate of outputs that change a content word of the input.
"""

from __future__ import annotations

from tplab.model.corpus import Example

_PAIRS: list[tuple[str, str, str]] = [  # (kind, bad, good)
    ("irregular_past", "oscar goed to the airport this morning", "oscar went to the airport this morning"),
    ("irregular_past", "fatima writed a letter to her grandfather", "fatima wrote a letter to her grandfather"),
    ("irregular_past", "ahmed taked the bus to the museum", "ahmed took the bus to the museum"),
    ("irregular_past", "ines bringed a cake for the teachers", "ines brought a cake for the teachers"),
    ("irregular_past", "the puppies finded a bone", "the puppies found a bone"),
    ("agreement", "the tigers was hungry", "the tigers were hungry"),
    ("agreement", "bruno like pancakes", "bruno likes pancakes"),
    ("agreement", "the monkeys eats bananas in the jungle", "the monkeys eat bananas in the jungle"),
    ("agreement", "my cousins plays basketball on saturdays", "my cousins play basketball on saturdays"),
    ("agreement", "the scientists was tired after the experiment", "the scientists were tired after the experiment"),
    ("agreement", "the owls sleeps during the day", "the owls sleep during the day"),
    ("agreement", "sven want a new bicycle", "sven wants a new bicycle"),
    ("perfect", "nadia have forgot her passport", "nadia has forgotten her passport"),
    ("perfect", "the pilots has eat breakfast", "the pilots have eaten breakfast"),
    ("perfect", "i has met the president", "i have met the president"),
    ("perfect", "the firefighters has drove the truck", "the firefighters have driven the truck"),
    ("negation", "hiroshi dont speak french", "hiroshi doesn't speak french"),
    ("negation", "the dolphins doesnt like cold water", "the dolphins don't like cold water"),
    ("article", "she found a old coin in the garden", "she found an old coin in the garden"),
    ("article", "my aunt is a optician", "my aunt is an optician"),
    ("article", "i saw a eagle near the lake", "i saw an eagle near the lake"),
    ("plural", "we bought two lamp for the bedroom", "we bought two lamps for the bedroom"),
    ("plural", "they adopted three kitten", "they adopted three kittens"),
    ("pronoun_case", "us visited rome last summer", "we visited rome last summer"),
    ("pronoun_case", "them played cricket with the neighbours", "they played cricket with the neighbours"),
    ("comparative", "this hotel is more cheaper than the hostel", "this hotel is cheaper than the hostel"),
    ("comparative", "my laptop is more faster than yours", "my laptop is faster than yours"),
    ("double_negation", "the children didn't eat nothing at the picnic", "the children didn't eat anything at the picnic"),
    ("double_negation", "the tourists didn't see nothing", "the tourists didn't see anything"),
    ("correct", "leila drinks green tea after lunch", "leila drinks green tea after lunch"),
    ("correct", "the fishermen sell fish at the harbour", "the fishermen sell fish at the harbour"),
    ("correct", "my grandparents live in a village near porto", "my grandparents live in a village near porto"),
]

OUTSIDE_SET: list[Example] = [Example(bad=bad, good=good, kind=kind) for kind, bad, good in _PAIRS]
