"""Twelve real NQ-Open questions with their gold passages (nq-open-oracle, as distributed with
Lost in the Middle; passages from Wikipedia, CC BY-SA 3.0). Together they make a prompt of
about 1,500 tokens for the embedded model: the size that broke a 1,024-token context."""

from __future__ import annotations

NQ_SAMPLE: list[tuple[str, list[str], str]] = [
    (
        "who got the first nobel prize in physics",
        ["Wilhelm Conrad Röntgen"],
        "The first Nobel Prize in Physics was awarded in 1901 to Wilhelm Conrad Röntgen, of Germany, who received 150,782 SEK, which is equal to 7,731,004 SEK in December 2007.  John Bardeen is the only laureate to win the prize twice—in 1956 and 1972. Maria Skłodowska-Curie also won two Nobel Prizes, for physics in 1903 and chemistry in 1911. William Lawrence Bragg was, until October 2014, the youngest ever Nobel laureate; he won the prize in 1915 at the age of 25. Two women have won the prize: Curie and Maria Goeppert-Mayer (1963). As of 2017, the prize has been awarded",
    ),
    (
        "when is the next deadpool movie being released",
        ["May 18, 2018"],
        "Deadpool 2 is scheduled to be released in the United States on May 18, 2018.  A sequel, Deadpool 3, is in development.",
    ),
    (
        "the south west wind blows across nigeria between",
        ["till September"],
        "With the Intertropical Convergence Zone (ITCZ) swinging northward over West Africa from the Southern Hemisphere in April, heavy showers coming from pre-monsoonal convective clouds mainly in the form of squall lines also known as the north easterlies formed mainly as a result of the interactions of the two dominant airmasses in Nigeria known as the Maritime tropical(south westerlies) and the Continental tropical(north easterlies), begins in central Nigeria while the Monsoons from the south atlantic ocean arrives in central Nigeria in July bringing with it high humidity, heavy cloud cover and heavy rainfall which can be daily occurrence lasting till September when the monsoons gradually begin retreating southward to the southern part of Nigeria.",
    ),
    (
        "what does hp mean in war and order",
        ["hit points or health points"],
        "Health or vitality is an attribute assigned to entities, such as the player character, enemies and objects within a role-playing or video game, that indicates its state in combat. Health is usually measured in hit points or health points, shortened to HP.  When the HP of a player character reaches zero, the player may lose a life or their character might become incapacitated or die. When the HP of an enemy reaches zero, it may be defeated or die and the player is usually rewarded in some way.",
    ),
    (
        "who wrote the first declaration of human rights",
        ["Cyrus"],
        "The Cylinder's text has traditionally been seen by biblical scholars as corroborative evidence of Cyrus' policy of the repatriation of the Jewish people following their Babylonian captivity (an act that the Book of Ezra attributes to Cyrus), as the text refers to the restoration of cult sanctuaries and repatriation of deported peoples. This interpretation has been disputed, as the text identifies only Mesopotamian sanctuaries, and makes no mention of Jews, Jerusalem, or Judea. The Cylinder has also been referred to by Mohammad Reza Pahlavi, the last Shah of Iran as the first declaration of universal human rights, a view rejected by some historians as anachronistic and a misunderstanding of the Cylinder's generic nature as a typical statement made by a new monarch at the beginning of his reign. Neil MacGregor, Director of the British Museum, has stated that the cylinder was \"the first attempt we know about running a society, a state with different nationalities and faiths—a new kind of statecraft.\" It was adopted as a national symbol of Iran by the Imperial State which put it on display in Tehran in 1971 to commemorate 2,500 year celebration of the Persian Empire. On October 14, the Mohammad Reza Shah's sister, Princess Ashraf Pahlavi, presented the United Nations Secretary General U Thant with a replica of the Cylinder. The princess asserted that \"the heritage of Cyrus was the heritage of human understanding, tolerance, courage, compassion and, above all, human liberty\".",
    ),
    (
        "who is the owner of reading football club",
        ["Xiu Li Dai", "Dai Xiuli"],
        "Reading Football Club ownership structure: 75% Owned by Renhe Sports Management Ltd, 100% owned by Xiu Li Dai and Yongge Dai. 25% Owned by Narin Niruttinanon",
    ),
    (
        "when is the last time the philadelphia won the superbowl",
        ["Super Bowl LII,", "2017"],
        "The Philadelphia Eagles are a professional American football franchise based in Philadelphia, Pennsylvania. The Eagles compete in the National Football League (NFL) as a member club of the league's National Football Conference (NFC) East division. They are Super Bowl champions, having won Super Bowl LII, their fourth NFL title, after winning in 1948, 1949, and 1960.",
    ),
    (
        "how many episodes are there in dragon ball z",
        ["291 episodes", "291"],
        "long-running anime sequel to the Dragon Ball TV series, adapted from the final twenty-six volumes of the Dragon Ball manga written by Akira Toriyama. The manga portion of the series debuted in Weekly Shōnen Jump in October 4, 1988 and lasted until 1995; the anime adaptation premiered in Japan on Fuji Television on April 26, 1989, taking over its predecessor's time slot, and ran until its end on January 31, 1996, lasting 291 episodes in Japan, and 276 episodes in the United States originally, although all 291 episodes were later broadcast when content from the first 67 episodes was restored.",
    ),
    (
        "who designed the garden city of new earswick",
        ["planner Raymond Unwin", "architect Barry Parker"],
        "As a result of the report, Joseph Rowntree's conviction that it must be possible to provide better housing for people on low incomes led him to acquire 150 acres of land near the village of Earswick, two and a half miles to the north of the centre of York. The planner Raymond Unwin and the architect Barry Parker were commissioned to produce an overall plan for a new 'garden' village and the detailed designs for its first houses.  They also designed the garden cities of Letchworth and Welwyn Garden City.",
    ),
    (
        "what is the first step in the evolution of the eye",
        ["photoreceptor proteins that sense light", "eyespots"],
        'The earliest predecessors of the eye were photoreceptor proteins that sense light, found even in unicellular organisms, called "eyespots".  Eyespots can only sense ambient brightness: they can distinguish light from dark, sufficient for photoperiodism and daily synchronization of circadian rhythms. They are insufficient for vision, as they cannot distinguish shapes or determine the direction light is coming from. Eyespots are found in nearly all major animal groups, and are common among unicellular organisms, including euglena. The euglena\'s eyespot, called a stigma, is located at its anterior end. It is a small splotch of red pigment which shades a collection of',
    ),
    (
        "where is the tv show the curse of oak island filmed",
        ["Oak Island"],
        'The Curse of Oak Island follows brothers Marty and Rick Lagina, originally from Kingsford, Michigan, through their efforts to find the speculated treasure or historical artifacts believed to be on Oak Island.  The series discusses the history of the island, recent discoveries, theories, and prior attempts to investigate the site. Areas of interest include the "Money Pit", Borehole 10-x, Smith\'s Cove, "Nolan\'s Cross", the "Hatch", the "Watchtower" and the "Swamp".',
    ),
    (
        "where is gall bladder situated in human body",
        ["beneath the liver"],
        "In vertebrates, the gallbladder is a small hollow organ where bile is stored and concentrated before it is released into the small intestine. In humans, the pear-shaped gallbladder lies beneath the liver, although the structure and position of the gallbladder can vary significantly among animal species.  It receives and stores bile, produced by the liver, via the common hepatic duct, and releases it via the common bile duct into the duodenum, where the bile helps in the digestion of fats.",
    ),
]
"""``(question, answers, gold passage)``."""
