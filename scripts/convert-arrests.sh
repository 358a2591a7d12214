#!/usr/bin/env bash
# Converts the Toronto arrests data (Arrests, 5226 people) from the R package
# carData, as shipped by Debian's r-cran-cardata, into data/arrests.csv and
# writes its schema, data/arrests.schema.json. Run once; the outputs are
# committed. Needs: apt-get install r-cran-cardata (brings R).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v Rscript >/dev/null || { echo "Rscript not found: apt-get install r-cran-cardata" >&2; exit 1; }

Rscript --vanilla - <<'R'
suppressPackageStartupMessages(library(carData))
d <- Arrests
# Age bands are fixed in advance (not taken from the data), so the schema's
# domains do not depend on who is in the table.
breaks <- c(-Inf, 17, 24, 34, 44, Inf)
labels <- c("12-17", "18-24", "25-34", "35-44", "45+")
out <- data.frame(
  released = d$released,
  colour   = d$colour,
  year     = d$year,
  age      = d$age,
  agegroup = cut(d$age, breaks = breaks, labels = labels),
  sex      = d$sex,
  employed = d$employed,
  citizen  = d$citizen,
  checks   = d$checks
)
write.csv(out, "data/arrests.csv", row.names = FALSE, quote = FALSE)
cat("carData", as.character(packageVersion("carData")), "rows", nrow(out), "\n")
R

cat > data/arrests.schema.json <<'JSON'
{
  "dimensions": [
    {"name": "year",     "values": ["1997", "1998", "1999", "2000", "2001", "2002"]},
    {"name": "colour",   "values": ["Black", "White"]},
    {"name": "sex",      "values": ["Female", "Male"]},
    {"name": "agegroup", "values": ["12-17", "18-24", "25-34", "35-44", "45+"]},
    {"name": "employed", "values": ["No", "Yes"]},
    {"name": "citizen",  "values": ["No", "Yes"]},
    {"name": "checks",   "values": ["0", "1", "2", "3", "4", "5", "6"]},
    {"name": "released", "values": ["No", "Yes"]}
  ]
}
JSON
