package scenario

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// TestWrongWaitsAnnouncedIsDistrusted: a store that declares it
// announces its waits is given announcedBlock to finish a quiet call
// until its episodes were caught blocked announcedDistrust times; the
// scenario's later episodes then block as for any store (a wrong
// declaration cost 5 s 56 times in one scenario).
func TestWrongWaitsAnnouncedIsDistrusted(t *testing.T) {
	env := NewEnv(Setup{Name: "sched-race", Caps: Caps{Backend: stores.Backend{WaitsAnnounced: true}}, Config: stores.Config{LockTTL: time.Second}, Clients: 1, Keys: 1, Seed: 1, RandSeed: 1})
	if got := env.schedBlock(time.Minute); got != announcedBlock {
		t.Fatalf("a declared store's first episode: Block %v, want %v", got, announcedBlock)
	}
	env.episodes = append(env.episodes, EpisodeRecord{Blocked: announcedDistrust - 1})
	if got := env.schedBlock(time.Minute); got != announcedBlock {
		t.Fatalf("after %d unannounced waits: Block %v, want %v", announcedDistrust-1, got, announcedBlock)
	}
	env.episodes = append(env.episodes, EpisodeRecord{Blocked: 1})
	if got := env.schedBlock(time.Minute); got == announcedBlock {
		t.Fatalf("after %d unannounced waits the declaration is still trusted", announcedDistrust)
	}
}
