package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/server/store"
)

// An answer is stored with its charge; asking the same query again returns
// it without a second charge, and a charge beyond the budget stores
// nothing.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "knowdp-store-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := store.OpenSQLite(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	alice, _, err := db.CreateAnalyst(ctx, "admin", "alice")
	if err != nil {
		log.Fatal(err)
	}
	const budget = 1 << 40 // epsilon 1 per analyst, in steps of 2^-40
	survey := store.DatasetRecord{ID: "survey", Name: "survey", Schema: "{}", Policy: "{}", Source: "{}", Counts: []byte{0}, Budget: budget, Created: time.Now()}
	if err := db.RegisterDataset(ctx, "admin", survey, nil); err != nil {
		log.Fatal(err)
	}
	ask := func(hash string, eps float64) {
		e := &store.Entry{AnalystID: alice.ID, DatasetID: "survey", Hash: hash, Kind: "cuboid",
			Request: json.RawMessage(`{}`), Answer: json.RawMessage(`{"counts":[3,5]}`)}
		stored, b, repeat, err := db.Charge(e, store.Cost{Uniform: int64(eps / privacy.EpsilonStep), Unit: "epsilon"}, 1, budget)
		if err != nil {
			fmt.Println(err)
			return
		}
		what := "a new answer"
		if repeat {
			what = "the stored answer " + string(stored.Answer) + ", free"
		}
		fmt.Printf("%s: %s; spent %g of %g\n", hash, what, float64(b.Spent)*privacy.EpsilonStep, float64(b.Total)*privacy.EpsilonStep)
	}
	ask("q1", 0.25)
	ask("q1", 0.25)
	ask("q2", 1)
	// Output:
	// q1: a new answer; spent 0.25 of 1
	// q1: the stored answer {"counts":[3,5]}, free; spent 0.25 of 1
	// insufficient budget: this query needs epsilon 1, remaining 0.75
}
