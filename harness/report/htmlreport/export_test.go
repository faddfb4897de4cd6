package htmlreport

// The external tests (the browser's) take a failing run as the internal
// ones do.
var FailingRun = failingRun
