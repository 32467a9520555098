"""What happens after planning: the per-node rollout records, maintenance windows and cron
schedules."""
