"""RuDi rule distillation: MCTS-SG statistics (sec. 3.2) and GS-NLN rules (sec. 3.3)."""

from online.rules.rudi import RuDi

__all__ = ["RuDi"]
