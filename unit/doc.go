// Package unit bounds what each privacy unit contributes to a release. A
// privacy unit is what the guarantee protects: a person, a student, a
// household. A fact table often has several rows per unit (arrests per
// person, ratings per student), named by a unit column that is read but
// never released and never part of a cuboid.
//
// Reading: NewCollector wraps a cube.Records so that cube.AggregateViews
// counts the table as usual (every value checked against the schema, the
// exact invariants counted on all rows) while the collector keeps, per
// unit, how many rows fall in each cell over the dimensions the release
// needs. Collector.Rows returns them as Rows.
//
// Bounding: Rows.Bound keeps at most K rows of every unit, chosen uniformly
// at random among its rows, independently for each unit, with a generator
// keyed by NewKey (256 bits drawn from the release's generator) and the
// unit's identifier. The choice depends on the unit's rows and the key
// only, never on the order the rows were read in, so a pipeline that groups
// rows by unit in any order (knowdp-beam) bounds exactly as knowdp release
// does. Rows.Counts counts the kept rows into the views to measure.
//
// Choosing K: ChooseMaxRows is a private quantile of the number of rows per
// unit (the exponential mechanism), CountTruncated a private count of the
// units that have more than K rows (discrete Laplace): the truncation's
// bias is data-dependent, so only such private estimates of it are
// published.
//
// Memory: the collector keeps 12 bytes per record read (the unit's index
// and the cell, in chunks; 8 more with weights) and each distinct unit
// identifier once; grouping and bounding add about 16 bytes per distinct
// (unit, cell). Measured through knowdp release: 535 MB at the peak for 10^7
// rows of 10^6 units (docs/release.md, "Privacy units"), so 10^8 rows need
// about 5 GB; knowdp-beam groups the rows by unit on its workers instead.
package unit
