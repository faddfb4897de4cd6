package htmlreport

// The external tests (the browser's) run scenarios as the internal ones do.
var (
	RunScenario = runScenario
	FailingRun  = failingRun
)
