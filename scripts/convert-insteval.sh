#!/usr/bin/env bash
# Converts the ETH Zurich lecture evaluations (InstEval: 73,421 ratings by
# 2,972 students) from the R package lme4, as shipped by Debian's
# r-cran-lme4, into data/insteval.csv and writes its schema,
# data/insteval.schema.json. Each row is one student's rating of one
# lecture; the column "student" names the student, the privacy unit of the
# demo (knowdp demo units). The lecturer column is dropped. Run once; the
# outputs are committed. Needs: apt-get install r-cran-lme4 (brings R).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v Rscript >/dev/null || { echo "Rscript not found: apt-get install r-cran-lme4" >&2; exit 1; }

Rscript --vanilla - <<'R'
suppressPackageStartupMessages(library(lme4))
d <- InstEval
out <- data.frame(
  student = as.character(d$s),
  dept    = as.character(d$dept),
  studage = as.character(d$studage),
  lectage = as.character(d$lectage),
  service = as.character(d$service),
  rating  = d$y
)
write.csv(out, "data/insteval.csv", row.names = FALSE, quote = FALSE)
cat("lme4", as.character(packageVersion("lme4")), "rows", nrow(out), "students", nlevels(d$s), "\n")
R

cat > data/insteval.schema.json <<'JSON'
{
  "dimensions": [
    {"name": "dept",    "values": ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "14", "15"]},
    {"name": "studage", "values": ["2", "4", "6", "8"]},
    {"name": "lectage", "values": ["1", "2", "3", "4", "5", "6"]},
    {"name": "service", "values": ["0", "1"]},
    {"name": "rating",  "values": ["1", "2", "3", "4", "5"]}
  ]
}
JSON
