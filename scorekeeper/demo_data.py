"""The demo's labelled set: short customer reviews, labelled with what they are about.

Each review is generated from templates (seeded, so the same seed gives the same rows on every
machine) and labelled with one of five topics: ``delivery``, ``quality``, ``price``, ``support``,
``usability``. Next to the text, each row carries columns a report can slice by: the product
``category`` (books, electronics, kitchen, clothing), the review's ``sentiment`` (positive,
negative) and a ``length`` bucket (short, medium, long by word count).

Some rows are ambiguous on purpose, as real reviews are, so that no model reaches accuracy 1.0:

* mixed rows talk about two topics ("Shipping took three weeks, but the price was fair.") and
  carry either one as the label, at random;
* vague rows ("Not what I expected.") say nothing about a topic and carry a random label.

The training split (``split="train"``) uses six of the eight phrasings of each topic and
sentiment; the held-out split (``split="test"``) uses all eight, so about a quarter of its clear
rows are worded in ways the model never saw in training: that is where a pretrained encoder earns
its keep.

Mixed rows are long more often than not, so the ``long`` slice is harder than the others.
This module is pure Python: no torch, no transformers.
"""

from __future__ import annotations

import random

__all__ = ["TOPICS", "CATEGORIES", "COLUMNS", "generate", "length_bucket"]

TOPICS: tuple[str, ...] = ("delivery", "quality", "price", "support", "usability")
_TOPIC_WEIGHTS = (0.27, 0.26, 0.18, 0.16, 0.13)
COLUMNS: tuple[str, ...] = ("review_id", "text", "label", "category", "sentiment", "length")
MIXED_SHARE = 0.14
VAGUE_SHARE = 0.04
TRAIN_PHRASINGS = 6  # of the 8 per topic and sentiment; the other 2 appear only in the held-out split

CATEGORIES: dict[str, tuple[str, ...]] = {
    "books": ("book", "cookbook", "novel", "notebook", "calendar", "atlas"),
    "electronics": ("headphones", "charger", "speaker", "keyboard", "router", "camera"),
    "kitchen": ("kettle", "blender", "frying pan", "toaster", "knife set", "coffee maker"),
    "clothing": ("jacket", "pair of boots", "sweater", "backpack", "raincoat", "pair of jeans"),
}

# Per topic and sentiment, one clause; {item} is a product of the row's category, {n} a small count.
_CLAUSES: dict[str, dict[str, tuple[str, ...]]] = {
    "delivery": {
        "positive": (
            "it arrived two days early",
            "shipping was fast",
            "the {item} was delivered the next morning",
            "the parcel came well packed",
            "delivery was quick and the tracking was accurate",
            "the courier brought it right to my door",
            "it got here sooner than promised",
            "the package showed up in perfect condition",
        ),
        "negative": (
            "the package took {n} weeks to arrive",
            "it arrived a week late",
            "the courier left the box out in the rain",
            "the tracking number never updated",
            "the parcel came crushed",
            "it was delivered to the wrong address",
            "the {item} is still not here after {n} weeks",
            "shipping took forever",
        ),
    },
    "quality": {
        "positive": (
            "the {item} feels solid and well made",
            "the build quality is excellent",
            "it still works perfectly after {n} months",
            "the materials are sturdy",
            "the stitching and finish are flawless",
            "the {item} is built to last",
            "everything about it feels durable",
            "the craftsmanship is superb",
        ),
        "negative": (
            "the {item} broke after {n} days",
            "it stopped working after a week",
            "the material feels cheap and thin",
            "the seams came apart",
            "the {item} cracked the first time I used it",
            "the finish scratches and peels",
            "it fell apart within a month",
            "a part snapped off almost immediately",
        ),
    },
    "price": {
        "positive": (
            "it is great value for the money",
            "the price was fair",
            "I got the {item} on sale for a bargain",
            "it costs half of what the big brands charge",
            "worth every penny",
            "cheaper than anywhere else I looked",
            "for this price it is a steal",
            "the discount made it very affordable",
        ),
        "negative": (
            "it is way too expensive for what it is",
            "the {item} is overpriced",
            "I found it for {n}0 dollars less elsewhere",
            "not worth the money",
            "the price went up the day after I ordered",
            "they charge extra for every little accessory",
            "far too pricey",
            "I paid a premium for nothing special",
        ),
    },
    "support": {
        "positive": (
            "customer service answered within minutes",
            "the support agent was friendly and helpful",
            "the seller sorted out my problem right away",
            "they replied to my email the same day",
            "the staff on the phone were patient and kind",
            "the help desk walked me through everything",
            "the seller went out of their way to help",
            "support replaced the {item} without any fuss",
        ),
        "negative": (
            "customer service never answered my emails",
            "I waited on hold for {n} hours",
            "the support agent was rude",
            "nobody at the help desk could answer a simple question",
            "the seller ignored all my messages",
            "they closed my complaint without reading it",
            "the staff kept transferring my call",
            "support promised a callback that never came",
        ),
    },
    "usability": {
        "positive": (
            "it is easy to set up",
            "the {item} is simple to use",
            "everything is intuitive",
            "it took me a minute to figure out",
            "the controls are clear and easy to reach",
            "it is comfortable to use every day",
            "even my grandmother can use it",
            "the instructions are short and clear",
        ),
        "negative": (
            "the instructions are confusing",
            "it took me {n} hours to figure out how to use it",
            "the buttons are awkward to reach",
            "the {item} is hard to use with one hand",
            "the settings are buried in endless menus",
            "it is fiddly to open and close",
            "nothing about it is intuitive",
            "setting it up was a nightmare",
        ),
    },
}

_OPENERS = (
    "I ordered the {item} last month.",
    "Bought this {item} as a gift for my brother.",
    "This is my second {item} from this shop.",
    "I have had the {item} for a few weeks now.",
    "My old {item} finally died, so I bought this one.",
    "Ordered it online on a Sunday.",
    "I needed a new {item} for a trip.",
    "A friend recommended this {item}.",
)
_CLOSERS = {
    "positive": ("Would buy again.", "Five stars.", "Highly recommended.", "Very happy overall.", "Thanks!"),
    "negative": ("Would not recommend.", "One star.", "Very disappointed.", "Never again.", "Avoid."),
}
_JOINERS = {True: (", and ", ". Also, ", "; ", ". On top of that, "), False: (", but ", ". However, ", ", although ", ". Then again, ")}
_VAGUE = (
    "Not what I expected.",
    "Meh.",
    "It is okay I guess.",
    "Would not buy again.",
    "Love it!",
    "Mixed feelings about this one.",
    "Does what it says.",
    "Hmm, not sure yet.",
    "Could be better.",
    "Exactly as described.",
)


def length_bucket(text: str) -> str:
    """short (up to 8 words), medium (9-16), long (more)."""
    words = len(text.split())
    return "short" if words <= 8 else "medium" if words <= 16 else "long"


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def _clause(rng: random.Random, topic: str, sentiment: str, item: str, phrasings: int) -> str:
    return rng.choice(_CLAUSES[topic][sentiment][:phrasings]).format(item=item, n=rng.randint(2, 6))


def _row(rng: random.Random, category: str, phrasings: int) -> tuple[str, str, str]:
    """(text, label, sentiment) of one review."""
    item = rng.choice(CATEGORIES[category])
    kind = rng.random()
    if kind < VAGUE_SHARE:
        text = rng.choice(_VAGUE)
        sentiment = "negative" if any(w in text for w in ("Not", "not", "Meh", "better")) else "positive"
        return text, rng.choice(TOPICS), sentiment
    topic = rng.choices(TOPICS, _TOPIC_WEIGHTS)[0]
    sentiment = rng.choice(("positive", "negative"))
    body = _clause(rng, topic, sentiment, item, phrasings)
    label = topic
    if kind < VAGUE_SHARE + MIXED_SHARE:
        other = rng.choice([t for t in TOPICS if t != topic])
        other_sentiment = rng.choice(("positive", "negative"))
        body += rng.choice(_JOINERS[other_sentiment == sentiment]) + _clause(rng, other, other_sentiment, item, phrasings)
        label = rng.choice((topic, other))
    parts = [_sentence(body)]
    if rng.random() < 0.4:
        parts.insert(0, rng.choice(_OPENERS).format(item=item))
    if rng.random() < 0.35:
        parts.append(rng.choice(_CLOSERS[sentiment]))
    return " ".join(parts), label, sentiment


def generate(n: int, *, seed: int = 0, split: str = "test", id_prefix: str = "r") -> list[dict[str, str]]:
    """``n`` reviews as dicts with the :data:`COLUMNS` keys; the same arguments give the same rows.

    ``split="train"`` draws from the training phrasings only, ``"test"`` from all of them. Ids are
    ``{id_prefix}00001``...: give the two splits different seeds and prefixes.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    phrasings = TRAIN_PHRASINGS if split == "train" else len(_CLAUSES["delivery"]["positive"])
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        category = rng.choice(tuple(CATEGORIES))
        text, label, sentiment = _row(rng, category, phrasings)
        rows.append(
            {
                "review_id": f"{id_prefix}{i + 1:05d}",
                "text": text,
                "label": label,
                "category": category,
                "sentiment": sentiment,
                "length": length_bucket(text),
            }
        )
    return rows
