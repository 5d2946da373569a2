"""Answers to ``ask_user``: the protocol, and its backends side by side.

``base.AnswerBox`` is what the tool and ``Session.answer`` use; ``local.LocalAnswerBox`` serves
one process, ``redis.RedisAnswerBox`` (imported from its module) any dispatcher and worker of a
fleet.
"""

from .base import AnswerBox, Answers
from .local import LocalAnswerBox

__all__ = ["AnswerBox", "Answers", "LocalAnswerBox"]
