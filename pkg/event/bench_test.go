package event

import "testing"

// BenchmarkParse parses a typical captured event (~470 bytes, no person
// updates) and a person-updating one.
func BenchmarkParse(b *testing.B) {
	for name, msg := range map[string]string{
		"captured": `{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"$pageview","distinct_id":"user-123456","timestamp":"2026-11-20T10:00:00.123Z","properties":{"$current_url":"https://example.com/pricing?plan=pro","$browser":"Firefox","$browser_version":131,"$os":"Linux","$screen_width":1920,"$screen_height":1080,"$referrer":"https://search.example.org/?q=analytics","$lib":"web","$lib_version":"1.449.2","utm_source":"newsletter","utm_campaign":"launch","$session_id":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f01"}}`,
		"set":      `{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"$set","distinct_id":"user-123456","timestamp":"2026-11-20T10:00:00.123Z","properties":{"$browser":"Firefox","$lib":"web"},"$set":{"email":"a@example.com","plan":"pro","seats":12},"$set_once":{"first_seen":"2026-11-20"}}`,
	} {
		b.Run(name, func(b *testing.B) {
			data := []byte(msg)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
