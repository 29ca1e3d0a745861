"""Speed verdicts and what they judge against: harness, judge, tiers, thresholds, run state."""
