"""Skills: lineage steps reversed into optimization records, exported for people and agents."""

from klineage.skills.export import export, read_json, to_json
from klineage.skills.extract import extract_skills
from klineage.skills.model import Skill, SkillSet

__all__ = ["Skill", "SkillSet", "export", "extract_skills", "read_json", "to_json"]
