"""The spine both scheduler sides stand on: pacing (a rate limit on acts, a back-off per service) and the fail-open
client of the capabilities' services. The durable audit (`jobaware.audit`), settings files (`jobaware.settings`)
and the job card (`jobaware.card`) are platform modules, because the card gateway and a slice use them too."""
