package search

// EmailGrams is emailGrams (grams.go), for the migration's test.
var EmailGrams = emailGrams
