"""The plan in other tools' formats: mig-parted configs, text renderings."""
