print("settings-broker")
